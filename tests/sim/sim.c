#include <stdio.h>
#include "zkmodel.h"
int main(void) {
    int f = zm_unit_checks();
    printf("zkmodel unit checks: %d failures\n", f);
    return f ? 1 : 0;
}
