// Host SIMT stand-in for <hip/hip_runtime.h> (see ../simt_host.h).
#pragma once
#include "../simt_host.h"
