build-asan/fs/fuse.o: fs/fuse.c /usr/include/fuse3/fuse_lowlevel.h \
 /usr/include/fuse3/fuse_common.h /usr/include/fuse3/libfuse_config.h \
 /usr/include/fuse3/fuse_opt.h /usr/include/fuse3/fuse_log.h \
 fs/../meta/meta.h fs/chunkstore.h fs/codec.h fs/objstore.h fs/fs.h \
 fs/log.h fs/reader.h fs/writer.h
/usr/include/fuse3/fuse_lowlevel.h:
/usr/include/fuse3/fuse_common.h:
/usr/include/fuse3/libfuse_config.h:
/usr/include/fuse3/fuse_opt.h:
/usr/include/fuse3/fuse_log.h:
fs/../meta/meta.h:
fs/chunkstore.h:
fs/codec.h:
fs/objstore.h:
fs/fs.h:
fs/log.h:
fs/reader.h:
fs/writer.h:
