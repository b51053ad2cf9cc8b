package mql

import (
	"math"
	"math/big"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Arithmetic follows MongoDB's type promotion: int32 op int32 stays int32
// unless it overflows (then int64); int64 overflow becomes double; any
// double makes a double; any decimal128 makes a decimal128.

type arithOp int

const (
	opAdd arithOp = iota
	opSub
	opMul
)

// arith applies op to two numeric values.
func arith(op arithOp, a, b bson.RawValue) bson.RawValue {
	ta, tb := a.Type, b.Type
	switch {
	case ta == bson.TypeDecimal128 || tb == bson.TypeDecimal128:
		return decimalArith(op, a, b)
	case ta == bson.TypeDouble || tb == bson.TypeDouble:
		x, y := asFloat(a), asFloat(b)
		switch op {
		case opAdd:
			return vDouble(x + y)
		case opSub:
			return vDouble(x - y)
		}
		return vDouble(x * y)
	}
	x, y := asInt64(a), asInt64(b)
	var r int64
	var overflow bool
	switch op {
	case opAdd:
		r = x + y
		overflow = (x > 0 && y > 0 && r < 0) || (x < 0 && y < 0 && r >= 0)
	case opSub:
		r = x - y
		overflow = (x >= 0 && y < 0 && r < 0) || (x < 0 && y > 0 && r >= 0)
	case opMul:
		if x != 0 && y != 0 {
			r = x * y
			overflow = r/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64)
		}
	}
	if overflow {
		fx, fy := float64(x), float64(y)
		switch op {
		case opAdd:
			return vDouble(fx + fy)
		case opSub:
			return vDouble(fx - fy)
		}
		return vDouble(fx * fy)
	}
	if ta == bson.TypeInt32 && tb == bson.TypeInt32 && r >= math.MinInt32 && r <= math.MaxInt32 {
		return vInt32(int32(r))
	}
	return vInt64(r)
}

// zeroLike is 0 of v's numeric type.
func zeroLike(v bson.RawValue) bson.RawValue {
	switch v.Type {
	case bson.TypeInt64:
		return vInt64(0)
	case bson.TypeDouble:
		return vDouble(0)
	case bson.TypeDecimal128:
		return vDecimal(decimalFromInt(0))
	}
	return vInt32(0)
}

// decimal128 helpers: a finite decimal is coefficient × 10^exponent.

type dec struct {
	c   *big.Int
	e   int
	nan bool
	inf int
}

func toDec(v bson.RawValue) dec {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return dec{c: big.NewInt(asInt64(v))}
	case bson.TypeDouble:
		f := asFloat(v)
		switch {
		case math.IsNaN(f):
			return dec{nan: true}
		case math.IsInf(f, 0):
			if f > 0 {
				return dec{inf: 1}
			}
			return dec{inf: -1}
		}
		return toDec(vDecimal(decimalFromFloat(f)))
	case bson.TypeDecimal128:
		d := v.Decimal128()
		if d.IsNaN() {
			return dec{nan: true}
		}
		if s := d.IsInf(); s != 0 {
			return dec{inf: s}
		}
		c, e, err := d.BigInt()
		if err != nil {
			return dec{nan: true}
		}
		return dec{c: c, e: e}
	}
	return dec{nan: true}
}

var (
	bigTen  = big.NewInt(10)
	maxCoef = new(big.Int).Exp(big.NewInt(10), big.NewInt(34), nil)
)

// fromDec rounds d to 34 significant digits (half to even) and encodes it.
func fromDec(d dec) bson.Decimal128 {
	switch {
	case d.nan:
		return mustDecimal("NaN")
	case d.inf > 0:
		return mustDecimal("Infinity")
	case d.inf < 0:
		return mustDecimal("-Infinity")
	}
	c := new(big.Int).Set(d.c)
	e := d.e
	neg := c.Sign() < 0
	c.Abs(c)
	q, r := new(big.Int), new(big.Int)
	for c.Cmp(maxCoef) >= 0 {
		q.QuoRem(c, bigTen, r)
		rd := r.Int64()
		if rd > 5 || (rd == 5 && q.Bit(0) == 1) {
			q.Add(q, big.NewInt(1))
		}
		c.Set(q)
		e++
	}
	if neg {
		c.Neg(c)
	}
	out, ok := bson.ParseDecimal128FromBigInt(c, e)
	if !ok {
		if e > 0 {
			if neg {
				return mustDecimal("-Infinity")
			}
			return mustDecimal("Infinity")
		}
		return mustDecimal("0")
	}
	return out
}

func mustDecimal(s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		panic("mql: bad decimal constant " + s)
	}
	return d
}

func decimalFromInt(i int64) bson.Decimal128 { return fromDec(dec{c: big.NewInt(i)}) }

// decimalFromFloat converts as MongoDB does, to 15 significant digits.
func decimalFromFloat(f float64) bson.Decimal128 {
	switch {
	case math.IsNaN(f):
		return mustDecimal("NaN")
	case math.IsInf(f, 1):
		return mustDecimal("Infinity")
	case math.IsInf(f, -1):
		return mustDecimal("-Infinity")
	}
	d, err := bson.ParseDecimal128(strconv.FormatFloat(f, 'e', 14, 64))
	if err != nil {
		return mustDecimal("NaN")
	}
	// Drop the trailing zeros the 15-digit rendering added.
	x := toDec(vDecimal(d))
	if x.c != nil && x.c.Sign() != 0 {
		q, r := new(big.Int), new(big.Int)
		for {
			q.QuoRem(x.c, bigTen, r)
			if r.Sign() != 0 {
				break
			}
			x.c.Set(q)
			x.e++
		}
		return fromDec(x)
	}
	return d
}

func decimalFloat(d bson.Decimal128) (float64, bool) {
	if d.IsNaN() {
		return math.NaN(), true
	}
	if s := d.IsInf(); s != 0 {
		return math.Inf(s), true
	}
	f, err := strconv.ParseFloat(d.String(), 64)
	return f, err == nil
}

func decimalIsZero(d bson.Decimal128) bool {
	c, _, err := d.BigInt()
	return err == nil && c.Sign() == 0
}

func decimalArith(op arithOp, a, b bson.RawValue) bson.RawValue {
	x, y := toDec(a), toDec(b)
	if x.nan || y.nan || x.inf != 0 || y.inf != 0 {
		fx, fy := specialFloat(x), specialFloat(y)
		var r float64
		switch op {
		case opAdd:
			r = fx + fy
		case opSub:
			r = fx - fy
		default:
			r = fx * fy
		}
		return vDecimal(decimalFromFloat(r))
	}
	switch op {
	case opMul:
		return vDecimal(fromDec(dec{c: new(big.Int).Mul(x.c, y.c), e: x.e + y.e}))
	}
	// Align exponents to the smaller one.
	e := min(x.e, y.e)
	cx := new(big.Int).Mul(x.c, new(big.Int).Exp(bigTen, big.NewInt(int64(x.e-e)), nil))
	cy := new(big.Int).Mul(y.c, new(big.Int).Exp(bigTen, big.NewInt(int64(y.e-e)), nil))
	if op == opSub {
		cy.Neg(cy)
	}
	return vDecimal(fromDec(dec{c: cx.Add(cx, cy), e: e}))
}

func specialFloat(d dec) float64 {
	switch {
	case d.nan:
		return math.NaN()
	case d.inf != 0:
		return math.Inf(d.inf)
	}
	f, _ := new(big.Float).SetInt(d.c).Float64()
	return f * math.Pow10(d.e)
}

// decimalDivide divides two numbers as decimals (MongoDB's $divide with a
// decimal operand), to 34 significant digits.
func decimalDivide(a, b bson.RawValue) bson.RawValue {
	x, y := toDec(a), toDec(b)
	if x.nan || y.nan || x.inf != 0 || y.inf != 0 {
		return vDecimal(decimalFromFloat(specialFloat(x) / specialFloat(y)))
	}
	if y.c.Sign() == 0 {
		return vDecimal(decimalFromFloat(specialFloat(x) / 0))
	}
	// Scale the numerator so the integer quotient carries 34+ digits.
	scale := 40
	num := new(big.Int).Mul(x.c, new(big.Int).Exp(bigTen, big.NewInt(int64(scale)), nil))
	q := new(big.Int).Quo(num, y.c)
	r := dec{c: q, e: x.e - y.e - scale}
	// Strip trailing zeros down to the ideal exponent.
	ideal := x.e - y.e
	rem := new(big.Int)
	for r.e < ideal && r.c.Sign() != 0 {
		t := new(big.Int)
		t.QuoRem(r.c, bigTen, rem)
		if rem.Sign() != 0 {
			break
		}
		r.c, r.e = t, r.e+1
	}
	return vDecimal(fromDec(r))
}

// int32Value returns a numeric v as an int32 when its value is integral
// and in range (mongod's Value::integral).
func int32Value(v bson.RawValue) (int32, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int32(asInt64(v)), true
	case bson.TypeInt64:
		i := asInt64(v)
		return int32(i), i == int64(int32(i))
	case bson.TypeDouble, bson.TypeDecimal128:
		f := asFloat(v)
		if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
			return 0, false
		}
		return int32(f), true
	}
	return 0, false
}

// cppDouble formats f as a C++ output stream does by default (6
// significant digits), the way mongod words numbers in some messages.
func cppDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}
