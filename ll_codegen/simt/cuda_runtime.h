// Host SIMT stand-in for <cuda_runtime.h> (see simt_host.h).
#pragma once
#include "simt_host.h"
