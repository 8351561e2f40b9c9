build-asan/fs/objstore_mem.o: fs/objstore_mem.c fs/objstore.h
fs/objstore.h:
