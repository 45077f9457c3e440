// The one include a user needs: every layer of the library (core, host,
// trace, hardware, attention, matmul, testing's check). For the arithmetic alone, without Boost
// and fmt, include core/operations.hpp (and host/elementwise.hpp). The
// doctest glue, testing/doctest.hpp, needs doctest and is included by itself.
#pragma once

#include "attention/call.hpp"
#include "attention/explain.hpp"
#include "attention/flash_forward.hpp"
#include "attention/kernels.hpp"
#include "attention/paper_reference.hpp"
#include "attention/repeated_max.hpp"
#include "attention/shape.hpp"
#include "core/dispatch.hpp"
#include "core/environment.hpp"
#include "core/format.hpp"
#include "core/names.hpp"
#include "core/operations.hpp"
#include "core/round.hpp"
#include "hardware/alu.hpp"
#include "hardware/gpu.hpp"
#include "hardware/libdevice.hpp"
#include "hardware/mma.hpp"
#include "hardware/mufu.hpp"
#include "host/elementwise.hpp"
#include "host/parallel.hpp"
#include "matmul/gemm.hpp"
#include "testing/check.hpp"
#include "trace/fmt.hpp"
#include "trace/names.hpp"
#include "trace/parse.hpp"
#include "trace/render.hpp"
#include "trace/trace.hpp"
