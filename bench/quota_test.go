package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseQuota(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Quota
		err  string
	}{
		{in: "0.5", want: Quota{CPUs: 0.5}},
		{in: " 1.5/10ms ", want: Quota{CPUs: 1.5, Period: 10 * time.Millisecond}},
		{in: "2/1s", want: Quota{CPUs: 2, Period: time.Second}},
		{in: "half", err: "the CPUs must be a number"},
		{in: "0.5/soon", err: "the period must be a duration"},
		{in: "0.5/0s", err: "a zero period"},
		{in: "0", err: "quota CPUs must be a positive number"},
		{in: "-1", err: "quota CPUs must be a positive number"},
		{in: "NaN", err: "quota CPUs must be a positive number"},
		{in: "0.5/2s", err: "quota Period must be within 1ms and 1s"},
		{in: "0.05/10ms", err: "allows under 1ms of CPU a period"},
	} {
		q, err := ParseQuota(tc.in)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, q, tc.in)
	}
	qs, err := ParseQuotas("0.5,1.5/10ms")
	require.NoError(t, err)
	assert.Equal(t, []Quota{{CPUs: 0.5}, {CPUs: 1.5, Period: 10 * time.Millisecond}}, qs)
	_, err = ParseQuotas("0.5,")
	assert.Error(t, err)
}

func TestQuotaString(t *testing.T) {
	assert.Equal(t, "0.5/100ms", Quota{CPUs: 0.5}.String())
	assert.Equal(t, "1.5/10ms", Quota{CPUs: 1.5, Period: 10 * time.Millisecond}.String())
	q, err := ParseQuota(Quota{CPUs: 0.25, Period: 20 * time.Millisecond}.String())
	require.NoError(t, err)
	assert.Equal(t, Quota{CPUs: 0.25, Period: 20 * time.Millisecond}, q)
}

func TestParseMultiples(t *testing.T) {
	ms, err := ParseMultiples("-x", "0.5, 2x,10,")
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5, 2, 10}, ms)
	for _, bad := range []string{"0", "-1", "1001", "two", "NaN"} {
		_, err := ParseMultiples("-x", bad)
		assert.ErrorContains(t, err, "-x: ", bad)
	}
}
