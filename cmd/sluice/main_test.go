package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Operations awaited by the demo may still sleep briefly after a run.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("time.Sleep"))
}

func TestDemoPrintsTable(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"demo", "-duration", "200ms", "-workers", "1", "-pin=false"}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	assert.Contains(t, s, "strict (default)")
	assert.Contains(t, s, "shares 1:1")
	assert.Contains(t, s, "of 1", "one worker reported")
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"demo", "-duration", "0s"},
		{"demo", "-load", "-1"},
		{"demo", "-cpu", "0s"},
		{"demo", "-workers", "-2"},
		{"demo", "-bogus"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		assert.Error(t, err, strings.Join(args, " "))
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help"}, &out, &out))
	assert.Contains(t, out.String(), "demo")
}
