build-asan/fs/codec.o: fs/codec.c fs/codec.h
fs/codec.h:
