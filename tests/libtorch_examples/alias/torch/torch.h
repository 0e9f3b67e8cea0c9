#include <dtr/dtr.h>
namespace torch = dtr;
