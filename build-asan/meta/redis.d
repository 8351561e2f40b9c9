build-asan/meta/redis.o: meta/redis.c meta/meta.h meta/../fs/log.h
meta/meta.h:
meta/../fs/log.h:
