// The whole core: formats, the environment, the exact operations (one at a
// time and over whole buffers) and the one rounding step.
#pragma once

#include "elementwise.hpp"
#include "environment.hpp"
#include "format.hpp"
#include "operations.hpp"
#include "round.hpp"
