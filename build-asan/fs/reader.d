build-asan/fs/reader.o: fs/reader.c fs/reader.h fs/../meta/meta.h \
 fs/chunkstore.h fs/codec.h fs/objstore.h fs/slice.h
fs/reader.h:
fs/../meta/meta.h:
fs/chunkstore.h:
fs/codec.h:
fs/objstore.h:
fs/slice.h:
