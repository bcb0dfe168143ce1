-- Sample RudderStack event warehouse used by examples/profiles_server.py.
-- profiles_server.py compiles this script into warehouse.sqlite on first use.
-- Identity stitching is interesting only if ids overlap, so several people
-- appear under anonymous ids before they identify, and one person (Maya)
-- uses two devices.

CREATE TABLE users (
    user_id      TEXT PRIMARY KEY,
    email        TEXT NOT NULL,
    first_name   TEXT,
    last_name    TEXT,
    country      TEXT,
    plan         TEXT,
    created_at   TEXT NOT NULL
);

CREATE TABLE identifies (
    id            TEXT PRIMARY KEY,
    anonymous_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    email         TEXT,
    context_device_type TEXT,
    timestamp     TEXT NOT NULL
);

CREATE TABLE tracks (
    id            TEXT PRIMARY KEY,
    anonymous_id  TEXT NOT NULL,
    user_id       TEXT,
    event         TEXT NOT NULL,
    properties    TEXT,
    timestamp     TEXT NOT NULL
);

CREATE TABLE pages (
    id            TEXT PRIMARY KEY,
    anonymous_id  TEXT NOT NULL,
    user_id       TEXT,
    path          TEXT NOT NULL,
    referrer      TEXT,
    timestamp     TEXT NOT NULL
);

CREATE TABLE orders (
    order_id      TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL,
    status        TEXT NOT NULL,
    currency      TEXT NOT NULL,
    total         REAL NOT NULL,
    items         INTEGER NOT NULL,
    created_at    TEXT NOT NULL
);

INSERT INTO users VALUES
    ('u_1001', 'maya.chen@example.com',    'Maya',    'Chen',     'US', 'pro',        '2024-01-14T09:12:00Z'),
    ('u_1002', 'liam.okafor@example.com',  'Liam',    'Okafor',   'GB', 'free',       '2024-02-03T17:45:00Z'),
    ('u_1003', 'sofia.rossi@example.com',  'Sofia',   'Rossi',    'IT', 'pro',        '2024-02-20T11:02:00Z'),
    ('u_1004', 'arjun.mehta@example.com',  'Arjun',   'Mehta',    'IN', 'enterprise', '2024-03-08T06:30:00Z'),
    ('u_1005', 'emma.schulz@example.com',  'Emma',    'Schulz',   'DE', 'free',       '2024-04-11T14:18:00Z'),
    ('u_1006', 'noah.garcia@example.com',  'Noah',    'Garcia',   'MX', 'pro',        '2024-05-02T20:05:00Z');

INSERT INTO identifies VALUES
    ('idf_01', 'anon_7f3a', 'u_1001', 'maya.chen@example.com',   'desktop', '2024-01-14T09:12:30Z'),
    ('idf_02', 'anon_c91e', 'u_1001', 'maya.chen@example.com',   'mobile',  '2024-03-02T18:40:11Z'),
    ('idf_03', 'anon_22bd', 'u_1002', 'liam.okafor@example.com', 'desktop', '2024-02-03T17:46:02Z'),
    ('idf_04', 'anon_5e10', 'u_1003', 'sofia.rossi@example.com', 'mobile',  '2024-02-20T11:03:45Z'),
    ('idf_05', 'anon_9a44', 'u_1004', 'arjun.mehta@example.com', 'desktop', '2024-03-08T06:31:10Z'),
    ('idf_06', 'anon_0b77', 'u_1005', 'emma.schulz@example.com', 'tablet',  '2024-04-11T14:19:27Z'),
    ('idf_07', 'anon_e3f2', 'u_1006', 'noah.garcia@example.com', 'mobile',  '2024-05-02T20:06:03Z');

INSERT INTO tracks VALUES
    ('trk_01', 'anon_7f3a', NULL,     'Product Viewed',   '{"sku": "TENT-2P", "price": 249.0}',   '2024-01-14T09:05:00Z'),
    ('trk_02', 'anon_7f3a', 'u_1001', 'Signed Up',        '{"method": "email"}',                  '2024-01-14T09:12:05Z'),
    ('trk_03', 'anon_7f3a', 'u_1001', 'Order Completed',  '{"order_id": "ord_5001"}',             '2024-01-15T10:22:00Z'),
    ('trk_04', 'anon_c91e', 'u_1001', 'Product Viewed',   '{"sku": "STOVE-MINI", "price": 59.0}', '2024-03-02T18:41:00Z'),
    ('trk_05', 'anon_c91e', 'u_1001', 'Order Completed',  '{"order_id": "ord_5006"}',             '2024-03-02T18:55:30Z'),
    ('trk_06', 'anon_22bd', 'u_1002', 'Signed Up',        '{"method": "google"}',                 '2024-02-03T17:45:40Z'),
    ('trk_07', 'anon_22bd', 'u_1002', 'Product Viewed',   '{"sku": "BOOT-HIKE", "price": 139.0}', '2024-02-04T08:10:00Z'),
    ('trk_08', 'anon_5e10', 'u_1003', 'Signed Up',        '{"method": "email"}',                  '2024-02-20T11:03:00Z'),
    ('trk_09', 'anon_5e10', 'u_1003', 'Order Completed',  '{"order_id": "ord_5003"}',             '2024-02-21T19:30:00Z'),
    ('trk_10', 'anon_9a44', 'u_1004', 'Signed Up',        '{"method": "sso"}',                    '2024-03-08T06:30:30Z'),
    ('trk_11', 'anon_9a44', 'u_1004', 'Order Completed',  '{"order_id": "ord_5004"}',             '2024-03-09T07:15:00Z'),
    ('trk_12', 'anon_9a44', 'u_1004', 'Order Completed',  '{"order_id": "ord_5008"}',             '2024-04-22T07:01:00Z'),
    ('trk_13', 'anon_0b77', 'u_1005', 'Signed Up',        '{"method": "email"}',                  '2024-04-11T14:19:00Z'),
    ('trk_14', 'anon_e3f2', 'u_1006', 'Product Viewed',   '{"sku": "PACK-40L", "price": 179.0}',  '2024-05-02T20:01:00Z'),
    ('trk_15', 'anon_e3f2', 'u_1006', 'Order Completed',  '{"order_id": "ord_5010"}',             '2024-05-03T12:44:00Z'),
    ('trk_16', 'anon_d4c8', NULL,     'Product Viewed',   '{"sku": "TENT-2P", "price": 249.0}',   '2024-05-05T16:20:00Z');

INSERT INTO pages VALUES
    ('pg_01', 'anon_7f3a', NULL,     '/',                 'https://www.google.com/', '2024-01-14T09:01:00Z'),
    ('pg_02', 'anon_7f3a', NULL,     '/products/tent-2p', NULL,                      '2024-01-14T09:04:30Z'),
    ('pg_03', 'anon_c91e', 'u_1001', '/products/stove',   'https://instagram.com/',  '2024-03-02T18:40:50Z'),
    ('pg_04', 'anon_22bd', NULL,     '/pricing',          'https://news.ycombinator.com/', '2024-02-03T17:44:00Z'),
    ('pg_05', 'anon_5e10', NULL,     '/',                 NULL,                      '2024-02-20T11:00:12Z'),
    ('pg_06', 'anon_9a44', 'u_1004', '/enterprise',       'https://www.bing.com/',   '2024-03-08T06:28:00Z'),
    ('pg_07', 'anon_e3f2', NULL,     '/products/pack-40l','https://www.google.com/', '2024-05-02T20:00:30Z'),
    ('pg_08', 'anon_d4c8', NULL,     '/products/tent-2p', 'https://www.pinterest.com/', '2024-05-05T16:19:40Z');

INSERT INTO orders VALUES
    ('ord_5001', 'u_1001', 'completed', 'USD', 249.00, 1, '2024-01-15T10:22:00Z'),
    ('ord_5002', 'u_1002', 'cancelled', 'GBP',  89.50, 1, '2024-02-05T12:00:00Z'),
    ('ord_5003', 'u_1003', 'completed', 'EUR', 312.40, 3, '2024-02-21T19:30:00Z'),
    ('ord_5004', 'u_1004', 'completed', 'USD', 1280.00, 8, '2024-03-09T07:15:00Z'),
    ('ord_5006', 'u_1001', 'completed', 'USD',  59.00, 1, '2024-03-02T18:55:30Z'),
    ('ord_5007', 'u_1003', 'refunded',  'EUR',  45.00, 1, '2024-03-28T09:10:00Z'),
    ('ord_5008', 'u_1004', 'completed', 'USD', 964.75, 5, '2024-04-22T07:01:00Z'),
    ('ord_5009', 'u_1001', 'completed', 'USD', 134.20, 2, '2024-04-30T21:17:00Z'),
    ('ord_5010', 'u_1006', 'completed', 'USD', 179.00, 1, '2024-05-03T12:44:00Z');
