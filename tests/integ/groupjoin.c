/*
 * groupjoin.c - test helper: a member of a cache group without a mount,
 * for the tests of what the metadata and the tools show of groups.
 *   groupjoin META_URL TTL GROUP NODE ADDR WEIGHT
 * Opens a session (TTL seconds), makes sure the volume has its group
 * secret, joins GROUP as NODE (hex) at ADDR ("-": serves nothing) with
 * WEIGHT bytes, prints "joined SID" and waits for its stdin to close;
 * then it leaves and closes its session (exit 0). Killed, it leaves a
 * session that dies. Exit 1 with a message on an error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/errors.h"
#include "meta/meta_group.h"
#include "meta/meta_volume.h"
#include "meta/meta.h"

int main(int argc, char **argv)
{
	struct meta_opts o = {0};
	struct meta_group_member self = {0};
	unsigned char secret[META_GROUP_SECRET];
	struct meta *m;
	char buf[64];
	int err;

	if (argc != 7) {
		fprintf(stderr, "usage: groupjoin META_URL TTL GROUP NODE "
				"ADDR WEIGHT\n");
		return 2;
	}
	o.session_ttl = atoi(argv[2]);
	self.node = strtoull(argv[4], NULL, 16);
	if (strcmp(argv[5], "-"))
		snprintf(self.addr, sizeof self.addr, "%s", argv[5]);
	self.weight = strtoull(argv[6], NULL, 10);
	if ((err = meta_open(argv[1], &o, &m))) {
		fprintf(stderr, "groupjoin: meta_open: %s\n", gr_strerror(err));
		return 1;
	}
	if ((err = meta_session_open(m, "/groupjoin")) ||
	    (err = meta_group_secret(m, secret)) ||
	    (err = meta_group_join(m, argv[3], &self))) {
		fprintf(stderr, "groupjoin: %s\n", gr_strerror(err));
		meta_close(m);
		return 1;
	}
	printf("joined %" PRIu64 "\n", meta_session_id(m));
	fflush(stdout);
	while (read(0, buf, sizeof buf) > 0)
		;
	err = meta_group_leave(m, argv[3], self.node);
	if (err)
		fprintf(stderr, "groupjoin: leave: %s\n", gr_strerror(err));
	meta_close(m);
	return err ? 1 : 0;
}
