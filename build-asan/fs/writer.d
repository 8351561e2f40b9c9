build-asan/fs/writer.o: fs/writer.c fs/writer.h fs/../meta/meta.h \
 fs/chunkstore.h fs/codec.h fs/objstore.h fs/log.h
fs/writer.h:
fs/../meta/meta.h:
fs/chunkstore.h:
fs/codec.h:
fs/objstore.h:
fs/log.h:
