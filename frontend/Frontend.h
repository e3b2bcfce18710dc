#pragma once
// Everything a user of kiln's graph-building API needs, in one include.
#include "frontend/Functional.h"
#include "frontend/GraphBuilder.h"
#include "frontend/Layers.h"
#include "frontend/Math.h"
#include "frontend/Module.h"
#include "frontend/Movement.h"
