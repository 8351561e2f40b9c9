build-asan/meta/redis_lua.o: meta/redis_lua.c meta/meta.h
meta/meta.h:
