package ratelimit

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
)

// Table is a set of per-key quotas that replace a Limiter's default quota
// for their keys. It is immutable: a new set of quotas is a new Table,
// swapped in whole (Limiter.SetTable, Reloader).
type Table struct {
	quotas map[string]int64
}

// emptyTable has no overrides.
var emptyTable = &Table{}

// NewTable returns a table of the given quotas (copied). It fails, naming
// the key, for a quota that is negative but not Unlimited, an empty key,
// or a key longer than MaxKeyLen.
func NewTable(quotas map[string]int64) (*Table, error) {
	t, err := newTable(quotas)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: NewTable: %w", err)
	}
	return t, nil
}

// newTable is NewTable, its errors not yet prefixed (New adds its own).
func newTable(quotas map[string]int64) (*Table, error) {
	if len(quotas) == 0 {
		return emptyTable, nil
	}
	t := &Table{quotas: make(map[string]int64, len(quotas))}
	var errs []error
	for k, q := range quotas {
		if err := checkKey(k); err != nil {
			errs = append(errs, err)
			continue
		}
		if q < 0 && q != Unlimited {
			errs = append(errs, fmt.Errorf("key %q: quota %d: use a count of units per window, 0 (refuse) or ratelimit.Unlimited", k, q))
			continue
		}
		t.quotas[k] = q
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// Len returns the number of keys in the table.
func (t *Table) Len() int { return len(t.quotas) }

// Quota returns key's quota in the table, and whether it has one.
func (t *Table) Quota(key string) (int64, bool) {
	q, ok := t.quotas[key]
	return q, ok
}

func (t *Table) quotaOr(key string, def int64) int64 {
	if q, ok := t.quotas[key]; ok {
		return q
	}
	return def
}

// The table file, version 1. It is text, one line each:
//
//	sluice-quotas 1 <n>
//	<key> <quota>        n lines, in any order, each key once
//	crc32c <8 hex>
//
// A key is 1 to MaxKeyLen bytes, none of them a space, a control
// character or DEL (UTF-8 is fine); a quota is a decimal count of units
// per window, or "unlimited". The last line holds the CRC-32C
// (Castagnoli) of every byte before it, in lowercase hexadecimal; nothing
// follows its newline. A file cut anywhere, or with any byte changed, fails
// to parse: the count, the trailer or the checksum gives it away.
const (
	tableMagic     = "sluice-quotas"
	tableVersion   = 1
	tableTrailer   = "crc32c "
	unlimitedQuota = "unlimited"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendTable appends the table file (version 1) of quotas to b, keys
// sorted, and returns it. It fails, naming the key, for a key or quota that
// NewTable refuses. The owner of the configuration writes the whole table
// this way every time, whatever changed.
func AppendTable(b []byte, quotas map[string]int64) ([]byte, error) {
	if _, err := NewTable(quotas); err != nil {
		return b, fmt.Errorf("ratelimit: table: %w", err)
	}
	start := len(b)
	b = fmt.Appendf(b, "%s %d %d\n", tableMagic, tableVersion, len(quotas))
	keys := make([]string, 0, len(quotas))
	for k := range quotas {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, ' ')
		if q := quotas[k]; q == Unlimited {
			b = append(b, unlimitedQuota...)
		} else {
			b = strconv.AppendInt(b, q, 10)
		}
		b = append(b, '\n')
	}
	sum := crc32.Checksum(b[start:], castagnoli)
	return fmt.Appendf(b, "%s%08x\n", tableTrailer, sum), nil
}

// ParseTable parses a table file (see AppendTable), whole: it checks the
// checksum first, then every line, and fails, saying where, for a file cut
// short, changed, of another version, with a duplicate key, or with more
// than maxKeys keys (maxKeys <= 0: no limit). A table that fails to parse
// changes nothing.
func ParseTable(data []byte, maxKeys int) (*Table, error) {
	t, err := parseTable(data, maxKeys)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: quota table: %w", err)
	}
	return t, nil
}

func parseTable(data []byte, maxKeys int) (*Table, error) {
	// The trailer: the last line, whole.
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("truncated: %d bytes, not ending with a newline", len(data))
	}
	body := data[:len(data)-1]
	i := bytes.LastIndexByte(body, '\n')
	trailer := body[i+1:]
	body = data[:i+1]
	hexSum, ok := bytes.CutPrefix(trailer, []byte(tableTrailer))
	if !ok || len(hexSum) != 8 {
		return nil, fmt.Errorf("truncated or corrupt: the last line is %q, not %q and 8 hex digits", clip(trailer), tableTrailer)
	}
	var want uint32
	for _, c := range hexSum {
		switch {
		case c >= '0' && c <= '9':
			want = want<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			want = want<<4 | uint32(c-'a'+10)
		default:
			return nil, fmt.Errorf("corrupt checksum %q: 8 lowercase hex digits expected", hexSum)
		}
	}
	if got := crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("checksum mismatch: the file says %08x, its %d bytes sum to %08x (truncated or corrupt)", want, len(body), got)
	}
	// The rest as one string: the keys are parts of it, one allocation
	// for the whole table rather than one per key.
	text := string(body)
	line, rest, _ := strings.Cut(text, "\n")
	fields := strings.Fields(line)
	if len(fields) != 3 || fields[0] != tableMagic {
		return nil, fmt.Errorf("line 1 is %q: not a quota table (%q <version> <count>)", clip(line), tableMagic)
	}
	if v, err := strconv.Atoi(fields[1]); err != nil || v != tableVersion {
		return nil, fmt.Errorf("line 1: version %q: this build reads version %d", fields[1], tableVersion)
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("line 1: count %q is not a number of keys", fields[2])
	}
	if maxKeys > 0 && n > maxKeys {
		return nil, fmt.Errorf("line 1: %d keys, more than the %d allowed", n, maxKeys)
	}
	// The keys.
	t := &Table{quotas: make(map[string]int64, n)}
	for ln := 2; len(rest) > 0; ln++ {
		if len(t.quotas) == n {
			return nil, fmt.Errorf("line %d: more lines than the %d keys the header counts", ln, n)
		}
		line, rest, _ = strings.Cut(rest, "\n")
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not \"<key> <quota>\"", ln, clip(line))
		}
		if err := checkKey(k); err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		q, err := parseQuota(v)
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q: %w", ln, clip(k), err)
		}
		before := len(t.quotas)
		if t.quotas[k] = q; len(t.quotas) == before {
			return nil, fmt.Errorf("line %d: key %q again", ln, clip(k))
		}
	}
	if len(t.quotas) != n {
		return nil, fmt.Errorf("%d keys where the header counts %d", len(t.quotas), n)
	}
	return t, nil
}

func parseQuota(v string) (int64, error) {
	if v == unlimitedQuota {
		return Unlimited, nil
	}
	q, err := strconv.ParseInt(v, 10, 64)
	if err != nil || q < 0 || len(v) == 0 || v[0] == '+' {
		return 0, fmt.Errorf("quota %q: use a count of units per window or %q", clip(v), unlimitedQuota)
	}
	return q, nil
}

// checkKey says why k cannot be a key of a table, or nil.
func checkKey(k string) error {
	if len(k) == 0 {
		return errors.New("empty key")
	}
	if len(k) > MaxKeyLen {
		return fmt.Errorf("key %q...: %d bytes, more than %d", k[:32], len(k), MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("key %q: spaces and control characters are not allowed", k)
		}
	}
	return nil
}

// clip shortens s for an error message.
func clip[S []byte | string](s S) S {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
