package gate

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sluice-go/sluice/admit"
)

func TestForLanesAsksItsLanesOnly(t *testing.T) {
	inner := newConcurrency(t, 1)
	g := ForLanes(inner, "background", "reports")
	bg := &admit.Attempt{Lane: "background"}
	rep := &admit.Attempt{Lane: "reports"}
	other := &admit.Attempt{Lane: "interactive"}
	def := &admit.Attempt{}

	assert.Nil(t, g.Admit(bg), "the first background request takes the one slot")
	assert.NotNil(t, g.Admit(rep), "reports share the inner limit")
	for range 5 {
		assert.Nil(t, g.Admit(other), "other lanes pass")
		assert.Nil(t, g.Admit(def), "the built-in lanes pass")
	}
	assert.Equal(t, 1, inner.InFlight())
	// Done of other lanes' requests does not give the slot back.
	g.Done(other, admit.Outcome{Status: 200})
	g.Done(def, admit.Outcome{Status: 200})
	assert.Equal(t, 1, inner.InFlight())
	g.Done(bg, admit.Outcome{Status: 200})
	assert.Equal(t, 0, inner.InFlight())
	assert.Nil(t, g.Admit(rep))
	assert.Same(t, inner, g.Inner())
}

func TestForLanesAttachesItsInnerGate(t *testing.T) {
	// A busy gate needs the executor: attached through the wrapper, it
	// fails outside one as it would alone.
	_, err := admit.New(admit.Config{Gates: []admit.Policy{ForLanes(newBusy(t, BusyConfig{}), "background")}}, admit.Host{})
	assert.Error(t, err)
}

func TestForLanesPanicsOnMisuse(t *testing.T) {
	assert.Panics(t, func() { ForLanes(nil, "background") })
	assert.Panics(t, func() { ForLanes(newConcurrency(t, 1)) })
}
