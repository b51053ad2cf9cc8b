// Package checkpoint stores pipeline checkpoints: Dir, a durable store in a
// pipeline's data directory, and Mem, an in-memory store for tests.
//
// # Layout
//
// Dir keeps one file per pipeline, <data_dir>/<pipeline>.checkpoint.json,
// replaced atomically on every Save: the record is written to a temporary
// file in the same directory, the file is fsynced, renamed over the old one,
// and the directory is fsynced so that the rename itself survives a power
// cut. After a crash, Load returns the old record or the new one, never a mix.
//
// We chose plain files over bbolt because a checkpoint is one small record
// written whole on every commit: a file per pipeline costs one write and two
// fsyncs, needs no page management, keeps pipelines independent (a damaged
// record affects one pipeline, not a shared database), and stays readable
// with cat and `tide checkpoint show`.
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
