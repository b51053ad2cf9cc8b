package file

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// checkLen is how many bytes at each end of the committed file the sink
// state checksums. The head catches a truncation while tide writes, such
// as logrotate's copytruncate: the writer goes on at its offset and the
// file starts with a hole of NUL bytes. The tail catches a rewrite or an
// edit of the last lines, and a file truncated and refilled to its old
// length.
const checkLen = 4 << 10

// maxCheckLen bounds the lengths a checkpoint may ask Open to read back.
const maxCheckLen = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksums is the part of the sink state that verifies the committed
// file: CRC-32C of its first and last bytes.
type checksums struct {
	headLen, tailLen int64
	headCRC, tailCRC uint32
}

// ends keeps the first and last checkLen bytes put into the file, so that
// State checksums them without reading the file back.
type ends struct {
	head []byte         // the file's first bytes, up to checkLen
	tail [checkLen]byte // the last bytes, a ring
	next int            // where the next byte goes in tail
	full bool           // tail holds checkLen bytes
}

// wrote adds the lines of batch's records to e. Only the first bytes of a
// file and the last of a batch are copied, so the cost per batch does not
// grow with its size.
func (e *ends) wrote(batch []cdc.Record) {
	for i := 0; i < len(batch) && len(e.head) < checkLen; i++ {
		e.head = appendHead(e.head, batch[i].Data)
		e.head = appendHead(e.head, newline)
	}
	from, need := len(batch), checkLen
	for from > 0 && need > 0 {
		from--
		need -= len(batch[from].Data) + 1
	}
	for i := from; i < len(batch); i++ {
		e.writeTail(batch[i].Data)
		e.writeTail(newline)
	}
}

var newline = []byte{'\n'}

func appendHead(head, p []byte) []byte {
	return append(head, p[:min(len(p), checkLen-len(head))]...)
}

func (e *ends) writeTail(p []byte) {
	if len(p) >= checkLen {
		copy(e.tail[:], p[len(p)-checkLen:])
		e.next, e.full = 0, true
		return
	}
	if n := copy(e.tail[e.next:], p); n < len(p) {
		copy(e.tail[:], p[n:])
	}
	e.full = e.full || e.next+len(p) >= checkLen
	e.next = (e.next + len(p)) % checkLen
}

// sums returns the checksums of what e holds.
func (e *ends) sums() checksums {
	c := checksums{headLen: int64(len(e.head)), headCRC: crc32.Checksum(e.head, castagnoli)}
	if e.full {
		c.tailLen = checkLen
		c.tailCRC = crc32.Update(crc32.Checksum(e.tail[e.next:], castagnoli), castagnoli, e.tail[:e.next])
	} else {
		c.tailLen = int64(e.next)
		c.tailCRC = crc32.Checksum(e.tail[:e.next], castagnoli)
	}
	return c
}

// appendState appends the checksums' fields of the sink state.
func (c checksums) appendState(b []byte) []byte {
	b = append(b, `,"head_bytes":`...)
	b = strconv.AppendInt(b, c.headLen, 10)
	b = append(b, `,"head_crc32c":`...)
	b = strconv.AppendUint(b, uint64(c.headCRC), 10)
	b = append(b, `,"tail_bytes":`...)
	b = strconv.AppendInt(b, c.tailLen, 10)
	b = append(b, `,"tail_crc32c":`...)
	return strconv.AppendUint(b, uint64(c.tailCRC), 10)
}

// checksumsOf returns st's checksums, nil if it has none (a checkpoint
// written before the sink recorded them), or an error if they are
// incomplete or do not fit in the committed length.
func checksumsOf(st state) (*checksums, error) {
	if st.HeadBytes == nil && st.HeadCRC32C == nil && st.TailBytes == nil && st.TailCRC32C == nil {
		return nil, nil
	}
	if st.HeadBytes == nil || st.HeadCRC32C == nil || st.TailBytes == nil || st.TailCRC32C == nil {
		return nil, fmt.Errorf("has only some of head_bytes, head_crc32c, tail_bytes and tail_crc32c")
	}
	c := &checksums{headLen: *st.HeadBytes, tailLen: *st.TailBytes, headCRC: *st.HeadCRC32C, tailCRC: *st.TailCRC32C}
	limit := min(*st.CommittedBytes, maxCheckLen)
	if c.headLen < 0 || c.headLen > limit || c.tailLen < 0 || c.tailLen > limit {
		return nil, fmt.Errorf("checksums %d head and %d tail bytes of a %d-byte file", c.headLen, c.tailLen, *st.CommittedBytes)
	}
	return c, nil
}

// verifyEnds checks the committed file's ends against want, if the
// checkpoint has checksums, before anything is cut or appended, and loads
// them into s.ends for the next State. A file shorter than committed is
// left for restore to refuse.
func (s *Sink) verifyEnds(t *target, f faultfs.File, committed int64, want *checksums) error {
	t.ends = ends{}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if fi.Size() < committed {
		return nil
	}
	if want != nil {
		if err := s.verifyRange(t, f, "its first", 0, want.headLen, want.headCRC, committed); err != nil {
			return err
		}
		if err := s.verifyRange(t, f, "the last", committed-want.tailLen, want.tailLen, want.tailCRC, committed); err != nil {
			return err
		}
	} else if committed > 0 {
		s.log.Info("checkpoint has no checksum of the file (it was written by an older tide); the committed bytes are not verified this time",
			"file", t.path, "committed_bytes", committed)
	}
	n := min(committed, checkLen)
	head, err := readRange(f, 0, n)
	if err != nil {
		return err
	}
	tail, err := readRange(f, committed-n, n)
	if err != nil {
		return err
	}
	t.ends.head = head
	t.ends.writeTail(tail)
	return nil
}

// verifyRange compares the CRC-32C of the file's length bytes at off with
// want.
func (s *Sink) verifyRange(t *target, f faultfs.File, which string, off, length int64, want uint32, committed int64) error {
	b, err := readRange(f, off, length)
	if err != nil {
		return err
	}
	if crc32.Checksum(b, castagnoli) == want {
		return nil
	}
	what := fmt.Sprintf("%s %d bytes (of the %d committed) do not match the checksum in the checkpoint", which, length, committed)
	if len(b) > 0 && len(bytes.Trim(b, "\x00")) == 0 {
		what += "; they are all NUL bytes"
	}
	return fmt.Errorf("file sink %s was changed by something other than this pipeline since its last commit: %s. "+
		"Something rewrote, edited, or truncated it while tide was writing (logrotate's copytruncate leaves NUL bytes at the start). "+
		"Appending would leave a file that does not hold the committed events; "+
		"restore the file as it was, or move it aside and reset the checkpoint to start over", t.path, what)
}

func readRange(f faultfs.File, off, length int64) ([]byte, error) {
	b := make([]byte, length)
	if _, err := f.ReadAt(b, off); err != nil && !(err == io.EOF && length == 0) {
		return nil, fmt.Errorf("file sink: read back committed bytes: %w", err)
	}
	return b, nil
}
