// Named leases in the hub's database: what keeps a search to one tuner. A lease is taken
// atomically by one of many contenders (processes or machines), refused to others while held,
// free again when released or expired, and a holder that lost it learns so when it renews.
// Times are the database's clock (sql::Connection::now_us), so leases mean the same on every
// machine of a PostgreSQL hub. One statement per operation, the same SQL on both databases.
#pragma once

#include <cstdint>
#include <string>

#include "tensorhub/store/sql.h"

namespace tensorhub {

/// A named lease as it stands: who holds it and for how much longer.
struct Lease {
  std::string owner;              ///< the holder; "" when nobody holds it
  std::int64_t remaining_us = 0;  ///< until it expires, on the database's clock; <= 0 once expired
};

/// Takes lease `name` of `project` for `owner` until now + lease_us (microseconds) when
/// nobody holds it, its holder let it expire, or `owner` holds it already (then it is
/// extended). Returns the lease as it stands after the call: `owner` holds it, or the other
/// holder still does (untouched). Owners must be unique per holder (host, pid and a random
/// part): a lease belongs to its owner string. Throws what sql::Connection::execute throws.
Lease acquire_lease(sql::Connection& db, const std::string& project, const std::string& name,
                    const std::string& owner, std::int64_t lease_us);

/// Extends `owner`'s lease to now + lease_us. False when `owner` no longer holds it (another
/// owner took it after it expired, or it was released): the holder must stop. A lease that
/// expired but that nobody took is still `owner`'s and is renewed.
bool renew_lease(sql::Connection& db, const std::string& project, const std::string& name,
                 const std::string& owner, std::int64_t lease_us);

/// Gives the lease up if `owner` holds it; a lease held by another owner is untouched.
void release_lease(sql::Connection& db, const std::string& project, const std::string& name,
                   const std::string& owner);

}  // namespace tensorhub
