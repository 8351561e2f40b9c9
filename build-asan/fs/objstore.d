build-asan/fs/objstore.o: fs/objstore.c fs/objstore.h
fs/objstore.h:
