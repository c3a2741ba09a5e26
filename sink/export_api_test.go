package sink

// Names the external tests use.
const DecisionLogLevel = decisionLogLevel

var Sinks = sinks
