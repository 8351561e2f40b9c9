build-asan/fs/log.o: fs/log.c fs/log.h
fs/log.h:
