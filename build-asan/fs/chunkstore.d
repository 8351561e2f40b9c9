build-asan/fs/chunkstore.o: fs/chunkstore.c fs/chunkstore.h fs/codec.h \
 fs/objstore.h fs/log.h
fs/chunkstore.h:
fs/codec.h:
fs/objstore.h:
fs/log.h:
