package ledgertest

// Migrate is migrate, for the external tests.
var Migrate = migrate
