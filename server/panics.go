package server

// panicBurst is how many handler panics a server logs in one second, with
// their stacks; the others are counted, and the next one logged says how
// many were not. A handler that panics on every request must not fill the
// disk during an incident.
const panicBurst = 10
