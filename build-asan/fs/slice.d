build-asan/fs/slice.o: fs/slice.c fs/slice.h fs/../meta/meta.h
fs/slice.h:
fs/../meta/meta.h:
