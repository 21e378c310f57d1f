#include <stdio.h>
#include "eddy.h"
int main(void) { printf("eddy %s\n", eddy_version()); return 0; }
