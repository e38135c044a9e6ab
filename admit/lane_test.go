package admit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/internal/gatetest"
	"github.com/sluice-go/sluice/queue"
)

func TestClassByLane(t *testing.T) {
	classes := map[string]queue.Class{"background": queue.Sheddable, "checkout": queue.Critical}
	classify := admit.ClassByLane(classes, queue.Default)
	classes["background"] = queue.Critical // the function keeps its own copy
	assert.Equal(t, queue.Sheddable, classify(&admit.Attempt{Lane: "background"}))
	assert.Equal(t, queue.Critical, classify(&admit.Attempt{Lane: "checkout"}))
	assert.Equal(t, queue.Default, classify(&admit.Attempt{Lane: "other"}))
	assert.Equal(t, queue.Default, classify(&admit.Attempt{}))
}

func TestPipelineClassifiesAsItsQueueDoes(t *testing.T) {
	gates := []admit.Policy{gatetest.Concurrency(t, 1)}
	p, err := admit.New(admit.Config{Gates: gates, Queue: &admit.QueueConfig{Classify: admit.ClassByLane(map[string]queue.Class{"batch": queue.Sheddable}, queue.Default)}}, admit.Host{})
	require.NoError(t, err)
	defer p.Close()
	assert.True(t, p.Classifies())
	cl, ok := p.Classify(&admit.Attempt{Lane: "batch"})
	assert.True(t, ok)
	assert.Equal(t, queue.Sheddable, cl)
	cl, ok = p.Classify(&admit.Attempt{})
	assert.True(t, ok)
	assert.Equal(t, queue.Default, cl)

	for _, cfg := range []admit.Config{{}, {Gates: gates, Queue: &admit.QueueConfig{}}} {
		p, err := admit.New(cfg, admit.Host{})
		require.NoError(t, err)
		assert.False(t, p.Classifies(), "no Classify, no classes")
		_, ok := p.Classify(&admit.Attempt{})
		assert.False(t, ok)
		p.Close()
	}
}
