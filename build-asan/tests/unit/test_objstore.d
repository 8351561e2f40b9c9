build-asan/tests/unit/test_objstore.o: tests/unit/test_objstore.c \
 tests/unit/../../fs/objstore.h
tests/unit/../../fs/objstore.h:
