build-asan/tests/unit/test_meta.o: tests/unit/test_meta.c \
 tests/unit/../../meta/meta.h
tests/unit/../../meta/meta.h:
