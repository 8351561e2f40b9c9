build-asan/fs/objstore_s3.o: fs/objstore_s3.c fs/objstore.h fs/log.h
fs/objstore.h:
fs/log.h:
