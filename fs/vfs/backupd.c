/*
 * backupd.c - the clients' automatic metadata backups (backupd.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/data/backup.h"
#include "fs/store/crypt.h"
#include "fs/store/objstore.h"
#include "fs/vfs/backupd.h"
#include "lib/errors.h"
#include "lib/fsutil.h"
#include "lib/log.h"
#include "lib/lz4stream.h"
#include "meta/meta_dump.h"
#include "meta/meta_volume.h"

/* How long a failed backup waits before any client tries again. */
#define RETRY_S 300

struct backupd {
	struct meta *m;
	struct objstore *s;
	int64_t interval;
	unsigned keep;
	pthread_t th;
	pthread_mutex_t lock; /* leaf */
	pthread_cond_t cond;  /* stopping was set */
	int stopping;	      /* protected by lock */
	atomic_int cut;	      /* stopping, for the dump's sink */
};

/* The store's sink, cut short when the client stops. */
static int sink_write(void *arg, const void *p, size_t n)
{
	void **chain = arg; /* {struct backupd *, struct backup_writer *} */
	struct backupd *b = chain[0];
	if (atomic_load(&b->cut))
		return ECANCELED;
	return backup_write(chain[1], p, n);
}

/*
 * Begin backup name: sealed when the store seals (an encrypted volume's),
 * with the volume's uuid and wrapped key as they are now (a `granary key
 * change` since the mount: the new record, which the new secret opens).
 */
static int begin(struct backupd *b, const char *name, struct backup_writer **w,
		 const char **what)
{
	if (!objstore_crypt_inner(b->s))
		return backup_begin(b->s, name, w);
	struct meta_volume v;
	struct backup_key k;
	int err = meta_load_volume(b->m, &v);
	if (err) {
		*what = "reading the volume's key record";
		return err;
	}
	if (!v.crypt[0]) { /* someone changed the settings under us */
		*what = "the volume lost its setting 'crypt' (backups of an "
			"encrypted volume stay sealed)";
		return EINVAL;
	}
	snprintf(k.uuid, sizeof k.uuid, "%s", v.uuid);
	snprintf(k.record, sizeof k.record, "%s", v.crypt);
	return backup_begin_sealed(b->s, &k, name, w);
}

/* One backup: dump, compress, store, record, prune. */
static void run_backup(struct backupd *b)
{
	struct backup_info info = {0};
	struct meta_backup rec = {0};
	struct meta_dump_stats st = {0};
	struct backup_writer *w = NULL;
	struct lz4stream_sink *z = NULL;
	char host[256] = "";
	const char *what = "the dump";

	gethostname(host, sizeof host - 1);
	info.time = time(NULL);
	info.sid = meta_session_id(b->m);
	snprintf(info.host, sizeof info.host, "%s", host);
	backup_name(info.time, info.sid, info.name);
	int64_t t0 = fsutil_mono_ms();
	int err = begin(b, info.name, &w, &what);
	void *chain[2] = {b, w};
	if (!err)
		err = lz4stream_sink_open(sink_write, chain, &z);
	if (!err)
		err = meta_dump(b->m, &(struct meta_dump_opts){0},
				lz4stream_sink_write, z, &st);
	int zerr = lz4stream_sink_close(z); /* ends the frame */
	if (!err)
		err = zerr;
	info.inodes = st.inodes;
	info.seconds = (double)(fsutil_mono_ms() - t0) / 1000;
	if (w) {
		int ferr = backup_finish(w, &info, err != 0);
		if (!err && ferr) {
			err = ferr;
			what = "storing it";
		}
	}
	if (err == ECANCELED) { /* unmounting: the next client does it */
		meta_backup_done(b->m, NULL, NULL);
		return;
	}
	if (err) {
		char msg[256];
		snprintf(msg, sizeof msg, "%s: %s", what, gr_strerror(err));
		log_warn("metadata backup %s failed: %s (the next try in %d "
			 "minutes, by any client)",
			 info.name, msg, RETRY_S / 60);
		rec.failed = time(NULL);
		meta_backup_done(b->m, &rec, msg);
		return;
	}
	snprintf(rec.name, sizeof rec.name, "%s", info.name);
	rec.time = info.time;
	rec.sid = info.sid;
	snprintf(rec.host, sizeof rec.host, "%s", info.host);
	rec.bytes = info.bytes;
	rec.inodes = info.inodes;
	rec.seconds = info.seconds;
	if ((err = meta_backup_done(b->m, &rec, NULL)))
		log_warn("metadata backup %s: stored, but not recorded: %s",
			 info.name, gr_strerror(err));
	log_info("metadata backup %s: %llu inodes, %llu bytes in %.1f s",
		 info.name, (unsigned long long)info.inodes,
		 (unsigned long long)info.bytes, info.seconds);
	size_t gone = 0;
	if ((err = backup_prune(b->s, b->keep, &gone)))
		log_warn("metadata backups: pruning the old ones: %s",
			 gr_strerror(err));
	else if (gone)
		log_info("metadata backups: deleted %zu old ones (keeping %u)",
			 gone, b->keep);
}

/* Wait ms, or until stopping: 1 when stopping. */
static int nap(struct backupd *b, int64_t ms)
{
	pthread_mutex_lock(&b->lock);
	int64_t until = fsutil_mono_ms() + ms;
	while (!b->stopping && fsutil_mono_ms() < until)
		fsutil_wait_until_ms(&b->cond, &b->lock, until);
	int stop = b->stopping;
	pthread_mutex_unlock(&b->lock);
	return stop;
}

static void *backupd_main(void *arg)
{
	struct backupd *b = arg;
	pthread_setname_np(pthread_self(), "gr-backup");
	/* a quarter of the interval, within [1 s, 60 s]: a backup is at
	 * most that late; the first look comes after a random part of it,
	 * so that clients mounted together do not all ask at once */
	int64_t tick = b->interval * 1000 / 4;
	if (tick < 1000)
		tick = 1000;
	if (tick > 60000)
		tick = 60000;
	int64_t wait = 1000 + (int64_t)(random() % tick);
	while (!nap(b, wait)) {
		int claimed = 0;
		int64_t ttl = b->interval > 3600 ? 2 * b->interval : 7200;
		int64_t retry = b->interval < RETRY_S ? b->interval : RETRY_S;
		int err =
		    meta_backup_claim(b->m, b->interval, ttl, retry, &claimed);
		/* META_EGONE: the volume went from under this client,
		 * which said so */
		if (err && err != EROFS && err != META_EGONE)
			log_warn("metadata backup: asking whether one is "
				 "due: %s",
				 gr_strerror(err));
		if (claimed)
			run_backup(b);
		wait = tick;
	}
	return NULL;
}

int backupd_open(struct meta *m, struct objstore *s, int64_t interval,
		 unsigned keep, struct backupd **out)
{
	struct backupd *b = calloc(1, sizeof *b);
	if (!b)
		return ENOMEM;
	b->m = m;
	b->s = s;
	b->interval = interval > 0 ? interval : BACKUP_INTERVAL;
	b->keep = keep ? keep : BACKUP_KEEP;
	pthread_mutex_init(&b->lock, NULL);
	fsutil_cond_init_mono(&b->cond);
	int err = pthread_create(&b->th, NULL, backupd_main, b);
	if (err) {
		pthread_cond_destroy(&b->cond);
		pthread_mutex_destroy(&b->lock);
		free(b);
		return err;
	}
	*out = b;
	return 0;
}

void backupd_close(struct backupd *b)
{
	if (!b)
		return;
	atomic_store(&b->cut, 1);
	pthread_mutex_lock(&b->lock);
	b->stopping = 1;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->th, NULL);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	objstore_close(b->s);
	free(b);
}
