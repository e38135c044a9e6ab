package mountinfo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseReadsCgroupMounts(t *testing.T) {
	text := `22 1 0:21 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate
30 22 0:26 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
31 22 0:27 / /mnt/with\040space rw - ext4 /dev/sda1 rw
broken line
`
	ms := Parse([]byte(text))
	require.Len(t, ms, 3)
	assert.Equal(t, Mount{Root: "/", Point: "/sys/fs/cgroup", FSType: "cgroup2", Super: []string{"rw", "nsdelegate"}}, ms[0])
	assert.Equal(t, "/docker/abc", ms[1].Root)
	assert.True(t, ms[1].HasOption("memory"))
	assert.False(t, ms[0].HasOption("memory"))
	assert.Equal(t, "/mnt/with space", ms[2].Point)
}

func TestUnescape(t *testing.T) {
	assert.Equal(t, "a b\tc", Unescape(`a\040b\011c`))
	assert.Equal(t, `plain`, Unescape(`plain`))
	assert.Equal(t, `bad\9x`, Unescape(`bad\9x`), "not an octal escape: kept")
}
