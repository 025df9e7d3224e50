-- The forum's data. Scores and comment counts are cached on posts and comments and kept equal to the votes
-- and comments tables in the same transaction as every change.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE COLLATE NOCASE,
    email TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('member', 'admin')),
    bio TEXT NOT NULL DEFAULT '',
    is_banned INTEGER NOT NULL DEFAULT 0, -- site-wide ban: cannot sign in
    created_at TEXT NOT NULL
);
CREATE TABLE forums (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    rules TEXT NOT NULL DEFAULT '',
    created_by INTEGER REFERENCES users(id),
    created_at TEXT NOT NULL
);
CREATE TABLE forum_moderators (
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    added_at TEXT NOT NULL,
    PRIMARY KEY (forum_id, user_id)
);
CREATE TABLE subscriptions (
    user_id INTEGER NOT NULL REFERENCES users(id),
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, forum_id)
);
CREATE TABLE posts (
    id INTEGER PRIMARY KEY,
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    author_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    url TEXT,
    body TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    edited_at TEXT,
    is_locked INTEGER NOT NULL DEFAULT 0,
    is_pinned INTEGER NOT NULL DEFAULT 0,
    is_deleted INTEGER NOT NULL DEFAULT 0, -- deleted by its author
    removed_by INTEGER REFERENCES users(id), -- removed by a moderator
    removed_reason TEXT,
    removed_at TEXT,
    score INTEGER NOT NULL DEFAULT 0,
    comment_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX posts_forum ON posts(forum_id, created_at);
CREATE INDEX posts_author ON posts(author_id);
CREATE TABLE comments (
    id INTEGER PRIMARY KEY,
    post_id INTEGER NOT NULL REFERENCES posts(id),
    parent_id INTEGER REFERENCES comments(id),
    author_id INTEGER NOT NULL REFERENCES users(id),
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    edited_at TEXT,
    is_deleted INTEGER NOT NULL DEFAULT 0,
    removed_by INTEGER REFERENCES users(id),
    removed_reason TEXT,
    removed_at TEXT,
    score INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX comments_post ON comments(post_id);
CREATE INDEX comments_author ON comments(author_id);
CREATE TABLE post_votes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    post_id INTEGER NOT NULL REFERENCES posts(id),
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, post_id)
);
CREATE TABLE comment_votes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    comment_id INTEGER NOT NULL REFERENCES comments(id),
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, comment_id)
);
CREATE TABLE reports (
    id INTEGER PRIMARY KEY,
    reporter_id INTEGER NOT NULL REFERENCES users(id),
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    post_id INTEGER REFERENCES posts(id),
    comment_id INTEGER REFERENCES comments(id),
    reason TEXT NOT NULL,
    details TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('open', 'dismissed', 'actioned')),
    created_at TEXT NOT NULL,
    resolved_by INTEGER REFERENCES users(id),
    resolved_at TEXT
);
CREATE TABLE bans (
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    reason TEXT NOT NULL,
    banned_by INTEGER NOT NULL REFERENCES users(id),
    created_at TEXT NOT NULL,
    expires_on TEXT,
    PRIMARY KEY (forum_id, user_id)
);
