package encode

import (
	"bytes"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

func indexNUL(b []byte) int { return bytes.IndexByte(b, 0) }

// appendHex appends b as lower-case hexadecimal, as ObjectID.Hex does.
func appendHex(dst []byte, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xF])
	}
	return dst
}

// appendISODate appends the UTC time ms milliseconds after the Unix epoch
// in the driver's relaxed form, Go's "2006-01-02T15:04:05.999Z07:00" in UTC:
// the fraction loses its trailing zeros and disappears when zero. ms must be
// in [0, maxRelaxedDate).
func appendISODate(dst []byte, ms int64) []byte {
	dst = appendDay(dst, ms/86400000)
	return appendTimeOfDay(dst, ms%86400000)
}

// appendDay appends "YYYY-MM-DDT" for a day since the epoch (in 1970..9999).
func appendDay(dst []byte, days int64) []byte {
	y, m, d := civil(days)
	return append(dst,
		byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10), '-',
		byte('0'+d/10), byte('0'+d%10), 'T')
}

// appendTimeOfDay appends "hh:mm:ss[.f[f[f]]]Z" for ms milliseconds into a day.
func appendTimeOfDay(dst []byte, ms int64) []byte {
	secs := int(ms / 1000)
	frac := int(ms % 1000)
	hh, mm, ss := secs/3600, secs/60%60, secs%60
	dst = append(dst,
		byte('0'+hh/10), byte('0'+hh%10), ':',
		byte('0'+mm/10), byte('0'+mm%10), ':',
		byte('0'+ss/10), byte('0'+ss%10))
	if frac != 0 {
		dst = append(dst, '.', byte('0'+frac/100))
		if frac%100 != 0 {
			dst = append(dst, byte('0'+frac/10%10))
			if frac%10 != 0 {
				dst = append(dst, byte('0'+frac%10))
			}
		}
	}
	return append(dst, 'Z')
}

// civil converts days since 1970-01-01 (non-negative) to a proleptic
// Gregorian year, month and day, counting in 400-year eras that start on
// March 1st so that the leap day ends each year.
func civil(days int64) (year, month, day int) {
	z := days + 719468 // days since 0000-03-01
	era := z / 146097
	doe := z - era*146097                                  // day of era, [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of era, [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of year from March 1st, [0, 365]
	mp := (5*doy + 2) / 153                                // month from March, [0, 11]
	day = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		month = int(mp + 3)
	} else {
		month = int(mp - 9)
	}
	year = int(yoe + era*400)
	if month <= 2 {
		year++
	}
	return year, month, day
}

// The largest canonical decimal128 significand, 10^34-1, in two words.
const (
	maxSignificandHi = 0x1ED09BEAD87C0
	maxSignificandLo = 0x378D8E63FFFFFFFF
)

// appendDecimal128 appends the string form of the IEEE 754-2008 decimal128
// with high and low words h and l, as the BSON decimal128 specification
// describes and the driver writes it: NaN, Infinity, -Infinity; otherwise
// plain notation when the exponent is at most 0 and the adjusted exponent
// at least -6, scientific notation (d.dddE±n) else. A non-canonical
// significand (one above 10^34-1, and any of the 0b11 combination form)
// is zero, as IEEE 754-2008 and the specification say and mongod prints
// it. (The driver's Decimal128.String prints such a significand as it is,
// 35 digits that its own parser then refuses.)
func appendDecimal128(dst []byte, h, l uint64) []byte {
	neg := h>>63 == 1
	switch h >> 58 & 0x1F {
	case 0x1F:
		return append(dst, "NaN"...)
	case 0x1E:
		if neg {
			return append(dst, "-Infinity"...)
		}
		return append(dst, "Infinity"...)
	}
	var exp int
	var hi, lo uint64
	if h>>61&3 == 3 {
		exp = int(h >> 47 & (1<<14 - 1))
	} else {
		exp = int(h >> 49 & (1<<14 - 1))
		hi, lo = h&(1<<49-1), l
		if hi > maxSignificandHi || hi == maxSignificandHi && lo > maxSignificandLo {
			hi, lo = 0, 0 // non-canonical
		}
	}
	exp -= 6176

	// The significand is below 2^113, at most 35 decimal digits. Peel off
	// nine digits at a time by dividing the 128-bit value by 10^9.
	var buf [36]byte
	i := len(buf)
	for {
		var r uint64
		hi, r = bits.Div64(0, hi, 1e9)
		lo, r = bits.Div64(r, lo, 1e9)
		if hi == 0 && lo == 0 {
			for r > 0 {
				i--
				buf[i] = byte('0' + r%10)
				r /= 10
			}
			break
		}
		for range 9 {
			i--
			buf[i] = byte('0' + r%10)
			r /= 10
		}
	}
	if i == len(buf) {
		i--
		buf[i] = '0'
	}
	digits := buf[i:]
	n := len(digits)

	if neg {
		dst = append(dst, '-')
	}
	adjusted := exp + n - 1
	if exp <= 0 && adjusted >= -6 {
		switch {
		case exp == 0:
			dst = append(dst, digits...)
		case n > -exp:
			dst = append(dst, digits[:n+exp]...)
			dst = append(dst, '.')
			dst = append(dst, digits[n+exp:]...)
		default:
			dst = append(dst, '0', '.')
			for range -exp - n {
				dst = append(dst, '0')
			}
			dst = append(dst, digits...)
		}
		return dst
	}
	dst = append(dst, digits[0])
	if n > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'E')
	if adjusted > 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(adjusted), 10)
}

// appendRegexOptions appends regular-expression options as the driver
// writes them: the characters sorted by code point, then escaped as a JSON
// string. (The driver sorts the string as runes, so an invalid UTF-8 byte
// becomes U+FFFD before it is written.)
func appendRegexOptions(dst []byte, opts []byte) []byte {
	ascii := true
	for _, c := range opts {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		var small [16]byte
		sorted := append(small[:0], opts...)
		slices.Sort(sorted)
		return appendEscaped(dst, sorted)
	}
	runes := make([]rune, 0, len(opts))
	for len(opts) > 0 {
		r, size := utf8.DecodeRune(opts)
		runes = append(runes, r)
		opts = opts[size:]
	}
	slices.Sort(runes)
	sorted := make([]byte, 0, 4*len(runes))
	for _, r := range runes {
		sorted = utf8.AppendRune(sorted, r)
	}
	return appendEscaped(dst, sorted)
}
