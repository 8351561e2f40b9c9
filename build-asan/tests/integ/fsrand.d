build-asan/tests/integ/fsrand.o: tests/integ/fsrand.c
