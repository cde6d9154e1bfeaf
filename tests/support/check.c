/* The failure counter behind CHECK (check.h). */
#include "support/check.h"

int test_failures;
