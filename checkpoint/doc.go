// Package checkpoint stores pipeline checkpoints: Dir, a durable store in a
// pipeline's data directory, and Mem, an in-memory store for tests.
//
// # Layout
//
// Dir keeps one file per pipeline, <data_dir>/<pipeline>.checkpoint.json.
// The file is two 4 KiB pages, each holding one record padded with spaces
// and numbered by a generation that every Save increments (as bbolt keeps
// two meta pages). The first Save of a pipeline in a process writes the
// file the always-atomic way: a temporary file, fsync, rename over the old
// one, fsync of the directory. Every later Save rewrites the page that
// does not hold the newest record, in place, and fdatasyncs the file: no
// new inode, no size change, no directory entry, one data page to flush.
// That is several times cheaper than a rename, and Save runs once per
// batch. A record larger than a page (unusually large positions) always
// takes the rename path, as a file of that one record.
//
// Load takes the valid page with the higher generation. A power cut in the
// middle of an in-place write can tear the page being written, but never
// the other one, which holds the previous checkpoint: Load logs the damaged
// page and returns that previous checkpoint, which the source replays from
// (the sink's commit that followed it is undone by the sink's own restore).
// Only if neither page is valid does Load refuse to start, as it does for
// any damage: it never silently falls back to no position. A file of one
// record, as earlier versions wrote, is read as before and replaced by a
// two-page file at the next Save.
//
// Tests cut the power under a Dir at every one of its writes and syncs
// (OpenFS with a disk that forgets what a power cut may undo) and check
// that Load then returns the last or the previous checkpoint saved.
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
//	  "generation": 42,
//	  "saved_at": "2026-11-30T03:20:00.123456789Z",
//	  "source": {"seq": 1000},
//	  "meta": {"k": "v"},
//	  "sink": {"committed_bytes": 123456},
//	  "checksum": "crc32c:1a2b3c4d"
//	}
//
// The generation is absent (0) in records of the one-page format. A
// record kept in a store shared by workers (checkpoint/natskv) also names
// its "owner", after the generation; a data directory's records have none,
// and an absent owner leaves the checksum as it was. The
// source position and sink state are embedded as raw JSON. The checksum
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
