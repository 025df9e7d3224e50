"""A discussion forum: communities, posts, threaded comments, votes, reports and moderation."""
