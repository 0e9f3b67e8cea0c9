#include "core/error.h"

#include <exception>

namespace dtr {

namespace {
template <typename E>
[[noreturn]] void rethrow_as(const E& e, std::string_view context) {
  throw E(fmt::format("{}{}", e.what(), context));
}
}  // namespace

void rethrow_with_context(std::string_view context) {
  // Most derived first: each catch keeps the dynamic type of the error.
  try {
    throw;
  } catch (const OutOfMemoryError& e) {
    rethrow_as(e, context);
  } catch (const CollectiveTimeoutError& e) {
    rethrow_as(e, context);
  } catch (const DistributedError& e) {
    rethrow_as(e, context);
  } catch (const DeviceError& e) {
    rethrow_as(e, context);
  } catch (const InternalError& e) {
    rethrow_as(e, context);
  } catch (const NotImplementedError& e) {
    rethrow_as(e, context);
  } catch (const IndexError& e) {
    rethrow_as(e, context);
  } catch (const TypeError& e) {
    rethrow_as(e, context);
  } catch (const ValueError& e) {
    rethrow_as(e, context);
  } catch (const Error& e) {
    rethrow_as(e, context);
  }
}

}  // namespace dtr
