// The whole core: formats, the environment, the exact operations and the one rounding step.
#pragma once

#include "environment.hpp"
#include "format.hpp"
#include "operations.hpp"
#include "round.hpp"
