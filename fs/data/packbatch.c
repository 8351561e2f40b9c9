/*
 * packbatch.c - the members of each batch that came (packbatch.h).
 */
#include "fs/data/packbatch.h"

int packbatch_come(struct packbatch_table *t, uint64_t id, uint32_t n,
		   int64_t now_ms)
{
	int s = -1, old = 0;

	for (int i = 0; i < PACKBATCH_SLOTS && s < 0; i++) {
		if (t->slot[i].id == id)
			s = i;
		else if (t->slot[i].seen_ms < t->slot[old].seen_ms)
			old = i;
	}
	if (s < 0) {
		s = old;
		t->slot[s].id = id;
		t->slot[s].n = n;
		t->slot[s].came = 0;
	}
	t->slot[s].came++;
	t->slot[s].seen_ms = now_ms;
	return t->slot[s].came >= t->slot[s].n;
}

int packbatch_whole(const struct packbatch_table *t, uint64_t id)
{
	for (int i = 0; i < PACKBATCH_SLOTS; i++)
		if (t->slot[i].id == id)
			return t->slot[i].came >= t->slot[i].n;
	return 0;
}
