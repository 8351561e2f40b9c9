build-asan/tests/unit/test_codec.o: tests/unit/test_codec.c \
 tests/unit/../../fs/codec.h
tests/unit/../../fs/codec.h:
