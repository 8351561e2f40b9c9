build-asan/fs/objstore_file.o: fs/objstore_file.c fs/objstore.h fs/log.h
fs/objstore.h:
fs/log.h:
