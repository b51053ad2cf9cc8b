// Package checkpoint stores pipeline checkpoints: Dir, a durable store in a
// pipeline's data directory, and Mem, an in-memory store for tests.
//
// # Layout
//
// Dir keeps one file per pipeline, <data_dir>/<pipeline>.checkpoint.json.
// The first Save of a pipeline writes it the always-atomic way: a temporary
// file in the same directory, fsync, rename over the old one, fsync of the
// directory. The record is padded with spaces to exactly one 4 KiB page, so
// every later Save rewrites that page in place and fdatasyncs the file: no
// new inode, no size change, no directory entry, one data page to flush.
// That is several times cheaper than a rename, and Save runs once per
// batch. A one-page write is never torn by the death of the process (the
// kernel copies a page whole), so after a crash Load returns the old record
// or the new one, never a mix. A record larger than a page (unusually large
// positions) always takes the rename path.
//
// A power cut in the middle of an in-place write could tear the page at the
// disk's sector size. Load then finds a checksum mismatch and refuses to
// start, as it does for any damage: it never silently falls back to an
// older position or to none.
//
// We chose plain files over bbolt because a checkpoint is one small record
// written whole on every commit: a file per pipeline costs one write and one
// fdatasync, needs no page management, keeps pipelines independent (a
// damaged record affects one pipeline, not a shared database), and stays
// readable with cat and `tide checkpoint show`.
//
// # Record
//
// A record is indented JSON:
//
//	{
//	  "format": 1,
//	  "pipeline": "gen-to-file",
//	  "saved_at": "2026-11-30T03:20:00.123456789Z",
//	  "source": {"seq": 1000},
//	  "meta": {"k": "v"},
//	  "sink": {"committed_bytes": 123456},
//	  "checksum": "crc32c:1a2b3c4d"
//	}
//
// The source position and sink state are embedded as raw JSON. The checksum
// is CRC-32C (Castagnoli) over the canonical content: the compact JSON
// encoding, without HTML escaping, of every field but the checksum, in the
// order above. Load returns the position compacted, so a compact position
// comes back byte for byte. A record
// that does not parse, has an unknown field or format version, names
// another pipeline or fails its checksum makes Load return a *CorruptError,
// whose message says what is wrong and how to reset. Load never treats a
// damaged record as "no checkpoint": that would silently restart the
// pipeline from the beginning.
//
// # Ownership
//
// Open takes an exclusive flock on <data_dir>/LOCK and writes its PID there.
// A second Open of the same directory, from this or another process, fails
// with an *InUseError naming the holder's PID. The kernel releases the lock
// when its holder dies, even by SIGKILL, so a stale LOCK file never blocks a
// restart. Reset is a method of Dir, so `tide checkpoint reset` fails while
// a run holds the directory. Read and ReadRaw take no lock, so that a
// `tide checkpoint show` may inspect a running pipeline's record: atomic
// replacement means a reader always sees a whole record.
//
// A record that cannot be read (say, a directory in its place) is refused
// like a corrupt one. Reset deletes the record whatever its state.
package checkpoint
