package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustTable(t testing.TB, quotas map[string]int64) []byte {
	t.Helper()
	b, err := AppendTable(nil, quotas)
	require.NoError(t, err)
	return b
}

func TestTableFileFormat(t *testing.T) {
	b := mustTable(t, map[string]int64{"tenant-b": 50, "tenant-a": 1000, "partner": Unlimited})
	assert.Equal(t, "sluice-quotas 1 3\n"+
		"partner unlimited\n"+
		"tenant-a 1000\n"+
		"tenant-b 50\n"+
		"crc32c fc57a19d\n", string(b))
	tab, err := ParseTable(b, 0)
	require.NoError(t, err)
	assert.Equal(t, 3, tab.Len())
	q, ok := tab.Quota("partner")
	assert.True(t, ok)
	assert.Equal(t, Unlimited, q)
	q, _ = tab.Quota("tenant-b")
	assert.Equal(t, int64(50), q)
	_, ok = tab.Quota("nobody")
	assert.False(t, ok)

	empty := mustTable(t, nil)
	tab, err = ParseTable(empty, 0)
	require.NoError(t, err)
	assert.Equal(t, 0, tab.Len())

	_, err = AppendTable(nil, map[string]int64{"with space": 1})
	assert.ErrorContains(t, err, `key "with space"`)
}

// Every truncation and every single-byte change of a table is refused.
func TestTableTruncatedOrCorruptIsRefused(t *testing.T) {
	b := mustTable(t, map[string]int64{"a": 1, "bb": 22, "ccc": 333})
	for n := range len(b) {
		_, err := ParseTable(b[:n], 0)
		assert.Error(t, err, "cut at %d: %q", n, b[:n])
	}
	for i := range b {
		for _, flip := range []byte{0x01, 0x20, 0x80} {
			c := append([]byte(nil), b...)
			c[i] ^= flip
			_, err := ParseTable(c, 0)
			assert.Error(t, err, "byte %d ^ %#x: %q", i, flip, c)
		}
	}
	_, err := ParseTable(append(append([]byte(nil), b...), "x\n"...), 0)
	assert.Error(t, err, "something after the trailer")
}

// withSum rewrites the trailer of body so that only the content is wrong.
func withSum(body string) []byte {
	sum := crc32.Checksum([]byte(body), castagnoli)
	return []byte(body + fmt.Sprintf("crc32c %08x\n", sum))
}

func TestTableContentErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"sluice-quotas 2 0\n", "version \"2\""},
		{"quotas 1 0\n", "not a quota table"},
		{"sluice-quotas 1 x\n", `count "x"`},
		{"sluice-quotas 1 1\na 1\nb 2\n", "line 3: more lines than the 1 keys"},
		{"sluice-quotas 1 2\na 1\n", "1 keys where the header counts 2"},
		{"sluice-quotas 1 2\na 1\na 2\n", `line 3: key "a" again`},
		{"sluice-quotas 1 1\na -1\n", `line 2: key "a": quota "-1"`},
		{"sluice-quotas 1 1\na +1\n", `quota "+1"`},
		{"sluice-quotas 1 1\na\n", `line 2: "a" is not`},
		{"sluice-quotas 1 1\n 1\n", "line 2: empty key"},
		{"sluice-quotas 1 1\na\tb 1\n", "control characters"},
		{"sluice-quotas 1 3\na 1\nb 1\nc 1\n", "3 keys, more than the 2 allowed"},
	} {
		_, err := ParseTable(withSum(tc.body), 2)
		if assert.Error(t, err, tc.body) {
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "ratelimit: quota table: "))
		}
	}
}

// NewTable's errors say where they come from and name the key.
func TestNewTableNamesTheBadKey(t *testing.T) {
	_, err := NewTable(map[string]int64{"k": -7})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), `ratelimit: NewTable: key "k": quota -7`), err.Error())
	_, err = NewTable(map[string]int64{"": 1})
	assert.EqualError(t, err, "ratelimit: NewTable: empty key")
}

// memSource is a TableSource in memory that can fail.
type memSource struct {
	data []byte
	err  error
}

func (m *memSource) Load(context.Context) ([]byte, error) { return m.data, m.err }

func TestReloaderKeepsThePreviousTableOnBadInput(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1})
	src := &memSource{data: mustTable(t, map[string]int64{"gold": 3})}
	var seen []error
	r, err := NewReloader(l, src, ReloadConfig{MaxKeys: 10, OnError: func(err error) { seen = append(seen, err) }})
	require.NoError(t, err)
	require.NoError(t, r.Reload(context.Background()))
	assert.Equal(t, int64(3), l.Quota("gold"))

	good := src.data
	for i, bad := range [][]byte{
		good[:len(good)/2],               // truncated
		append([]byte("x"), good[1:]...), // corrupt
		mustTable(t, map[string]int64{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1, "i": 1, "j": 1, "k": 1}), // over N
		nil, // empty
	} {
		src.data = bad
		err := r.Reload(context.Background())
		assert.Error(t, err, "case %d", i)
		assert.Equal(t, int64(3), l.Quota("gold"), "case %d: the previous table stays", i)
	}
	src.err = errors.New("store down")
	err = r.Reload(context.Background())
	assert.ErrorContains(t, err, "ratelimit: loading the quota table: store down")
	assert.Equal(t, 3, allowN(l, "gold", 5))

	st := r.Stats()
	assert.Equal(t, int64(1), st.Loads)
	assert.Equal(t, int64(5), st.Failures)
	assert.Equal(t, err, st.LastError)
	assert.Equal(t, 1, st.Keys)
	assert.Len(t, seen, 5)

	// The next good table heals it.
	src.err = nil
	src.data = mustTable(t, map[string]int64{"gold": 5, "silver": 2})
	require.NoError(t, r.Reload(context.Background()))
	assert.Equal(t, int64(5), l.Quota("gold"))
	assert.Equal(t, int64(2), l.Quota("silver"))
	assert.Equal(t, 2, r.Stats().Keys)
}

func TestReloaderRunsFromAFile(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1})
	path := filepath.Join(t.TempDir(), "quotas")
	write := func(q map[string]int64) {
		tmp := path + ".new"
		require.NoError(t, os.WriteFile(tmp, mustTable(t, q), 0o644))
		require.NoError(t, os.Rename(tmp, path)) // replaced whole
	}
	write(map[string]int64{"k": 10})
	r, err := NewReloader(l, FileSource{Path: path}, ReloadConfig{Period: time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return l.Quota("k") == 10 }, 10*time.Second, time.Millisecond)
	write(map[string]int64{"k": 20})
	require.Eventually(t, func() bool { return l.Quota("k") == 20 }, 10*time.Second, time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644))
	require.Eventually(t, func() bool { return r.Stats().Failures > 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, int64(20), l.Quota("k"))
	cancel()
	<-done
	assert.False(t, r.Stats().LoadedAt.IsZero())
}

func TestNewReloaderNamesTheBadValue(t *testing.T) {
	l, _ := newLimiter(t, Config{Window: time.Minute, Quota: 1})
	_, err := NewReloader(nil, FileSource{}, ReloadConfig{})
	assert.ErrorContains(t, err, "the Limiter is nil")
	_, err = NewReloader(l, nil, ReloadConfig{})
	assert.ErrorContains(t, err, "the TableSource is nil")
	_, err = NewReloader(l, FileSource{}, ReloadConfig{Period: -time.Second})
	assert.ErrorContains(t, err, "ReloadConfig.Period is -1s")
	_, err = NewReloader(l, FileSource{}, ReloadConfig{MaxKeys: -1})
	assert.ErrorContains(t, err, "ReloadConfig.MaxKeys is -1")
	_, err = FileSource{Path: filepath.Join(t.TempDir(), "none")}.Load(context.Background())
	assert.ErrorIs(t, err, os.ErrNotExist)
}
