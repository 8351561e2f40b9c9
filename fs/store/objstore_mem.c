/*
 * objstore_mem.c - the mem:// backend: objects in a hash table (lib/hash,
 * by the key's XXH3) in process memory, for unit tests. Sharing: mem:// (no
 * name) is private to its handle and freed on close; mem://NAME is shared by
 * every handle opened with the same NAME in this process and lives until the
 * process exits, so a test can "format" a volume, close it and "mount" it
 * again, as with a real store.
 */
#include "fs/store/objstore.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/queue.h>
#include <xxhash.h>

#include "lib/hash.h"

#define MEM_NAME_MAX  128
#define MEM_HASH_BITS 6 /* 64 buckets to start with */

struct mem_obj {
	struct hash_node hn; /* in its table's objs */
	char *key;
	unsigned char *data;
	size_t len;
	int64_t mtime; /* of the last put, unix seconds */
};

struct mem_table {
	SLIST_ENTRY(mem_table) named; /* protected by registry_lock */
	char *name;		      /* NULL: private table */
	/* Lock order: registry_lock is never held while taking this one. */
	pthread_mutex_t lock;
	struct hash objs; /* protected by lock */
};

struct mem_store {
	struct objstore base; /* first: objstore_* see only this */
	struct mem_table *t;
};

/* Named tables of this process; never freed (see the head comment). */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by registry_lock */
static SLIST_HEAD(, mem_table) registry = SLIST_HEAD_INITIALIZER(registry);

/* ---- the table ---- */

static struct mem_table *table_new(const char *name)
{
	struct mem_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	if (hash_init(&t->objs, MEM_HASH_BITS))
		goto free_t;
	if (name && !(t->name = strdup(name)))
		goto release_objs;
	pthread_mutex_init(&t->lock, NULL);
	return t;

release_objs:
	hash_release(&t->objs);
free_t:
	free(t);
	return NULL;
}

static void obj_free(struct mem_obj *o)
{
	free(o->key);
	free(o->data);
	free(o);
}

static void table_free(struct mem_table *t)
{
	struct hash_node *n, *next;

	for (n = hash_first(&t->objs); n; n = next) {
		next = hash_next(&t->objs, n);
		obj_free(hash_entry(n, struct mem_obj, hn));
	}
	pthread_mutex_destroy(&t->lock);
	hash_release(&t->objs);
	free(t->name);
	free(t);
}

static uint64_t key_hash(const char *key)
{
	return XXH3_64bits(key, strlen(key));
}

static int match_key(const struct hash_node *n, const void *key)
{
	return !strcmp(hash_entry(n, struct mem_obj, hn)->key, key);
}

/* Key's object, or NULL; lock held. */
static struct mem_obj *find(struct mem_table *t, const char *key)
{
	struct hash_node *n =
	    hash_find(&t->objs, key_hash(key), match_key, key);

	return n ? hash_entry(n, struct mem_obj, hn) : NULL;
}

/* ---- ops ---- */

static struct mem_table *table_of(struct objstore *s)
{
	return ((struct mem_store *)s)->t;
}

static int mem_get(struct objstore *s, const char *key, uint64_t off,
		   size_t len, void **data, size_t *got)
{
	struct mem_table *t = table_of(s);
	int err = 0;

	pthread_mutex_lock(&t->lock);
	struct mem_obj *o = find(t, key);
	if (!o) {
		err = ENOENT;
		goto unlock;
	}
	size_t n = 0;
	if (off < o->len) {
		n = o->len - (size_t)off;
		if (len && len < n)
			n = len;
	}
	/* Always a real buffer, even for 0 bytes: callers free() it. */
	void *buf = malloc(n ? n : 1);
	if (!buf) {
		err = ENOMEM;
		goto unlock;
	}
	if (n)
		memcpy(buf, o->data + off, n);
	*data = buf;
	*got = n;
unlock:
	pthread_mutex_unlock(&t->lock);
	return err;
}

static int mem_put(struct objstore *s, const char *key, const void *data,
		   size_t len)
{
	struct mem_table *t = table_of(s);
	/* Copy outside the lock; readers of other keys are not held up. */
	unsigned char *copy = malloc(len ? len : 1);

	if (!copy)
		return ENOMEM;
	memcpy(copy, data, len);

	pthread_mutex_lock(&t->lock);
	struct mem_obj *o = find(t, key);
	if (o) {
		free(o->data);
		o->data = copy;
		o->len = len;
		o->mtime = (int64_t)time(NULL);
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	o = calloc(1, sizeof(*o));
	if (!o || !(o->key = strdup(key))) {
		pthread_mutex_unlock(&t->lock);
		free(o);
		free(copy);
		return ENOMEM;
	}
	o->data = copy;
	o->len = len;
	o->mtime = (int64_t)time(NULL);
	hash_insert(&t->objs, &o->hn, key_hash(key));
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int mem_del(struct objstore *s, const char *key)
{
	struct mem_table *t = table_of(s);

	pthread_mutex_lock(&t->lock);
	struct mem_obj *o = find(t, key);
	if (o)
		hash_remove(&t->objs, &o->hn);
	pthread_mutex_unlock(&t->lock);
	if (o)
		obj_free(o);
	return 0;
}

static int mem_head(struct objstore *s, const char *key, uint64_t *size)
{
	struct mem_table *t = table_of(s);
	int err = 0;

	pthread_mutex_lock(&t->lock);
	struct mem_obj *o = find(t, key);
	if (o)
		*size = o->len;
	else
		err = ENOENT;
	pthread_mutex_unlock(&t->lock);
	return err;
}

struct list_item {
	char *key;
	uint64_t size;
	int64_t mtime;
};

static int mem_list(struct objstore *s, const char *prefix, objstore_list_fn fn,
		    void *arg)
{
	struct mem_table *t = table_of(s);
	size_t plen = strlen(prefix), n = 0, i;
	struct list_item *items;
	int err = 0;

	/* Snapshot, then call fn unlocked: fn may well delete or put
	 * (garbage collection does), which would deadlock under the lock. */
	pthread_mutex_lock(&t->lock);
	size_t count = hash_count(&t->objs);
	items = calloc(count ? count : 1, sizeof(*items));
	if (!items) {
		pthread_mutex_unlock(&t->lock);
		return ENOMEM;
	}
	for (struct hash_node *x = hash_first(&t->objs); x;
	     x = hash_next(&t->objs, x)) {
		struct mem_obj *o = hash_entry(x, struct mem_obj, hn);
		if (strncmp(o->key, prefix, plen))
			continue;
		if (!(items[n].key = strdup(o->key))) {
			err = ENOMEM;
			break;
		}
		items[n].mtime = o->mtime;
		items[n++].size = o->len;
	}
	pthread_mutex_unlock(&t->lock);

	for (i = 0; i < n && !err; i++)
		err = fn(arg, items[i].key, items[i].size, items[i].mtime);
	for (i = 0; i < n; i++)
		free(items[i].key);
	free(items);
	return err;
}

static void mem_close(struct objstore *s)
{
	struct mem_store *m = (struct mem_store *)s;

	if (!m->t->name)
		table_free(m->t);
	free(m);
}

static const struct objstore_ops mem_ops = {
    .scheme = "mem",
    .get = mem_get,
    .put = mem_put,
    .del = mem_del,
    .head = mem_head,
    .list = mem_list,
    .close = mem_close,
};

/* ---- open ---- */

static int name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n > MEM_NAME_MAX)
		return 0;
	for (const char *c = name; *c; c++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' ||
		      *c == '.'))
			return 0;
	}
	return 1;
}

/* Find or create the named table. */
static struct mem_table *named_table(const char *name)
{
	struct mem_table *t;

	pthread_mutex_lock(&registry_lock);
	SLIST_FOREACH(t, &registry, named) {
		if (!strcmp(t->name, name))
			goto unlock;
	}
	t = table_new(name);
	if (t)
		SLIST_INSERT_HEAD(&registry, t, named);
unlock:
	pthread_mutex_unlock(&registry_lock);
	return t;
}

int objstore_mem_open(const char *url, struct objstore **out)
{
	const char *name = url + strlen("mem://");
	struct mem_store *m;

	if (strncmp(url, "mem://", 6) || !name_valid(name))
		return OBJSTORE_EURL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return ENOMEM;
	m->t = *name ? named_table(name) : table_new(NULL);
	if (!m->t) {
		free(m);
		return ENOMEM;
	}
	m->base.ops = &mem_ops;
	*out = &m->base;
	return 0;
}
