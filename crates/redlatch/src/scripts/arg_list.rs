//! The keys or arguments of one script request, in one buffer: each
//! added value is written where the last one ended, so a request costs a
//! couple of allocations however many keys and arguments it has (one `Vec`
//! per value before, two allocations each, on every acquire and release).

use std::io;

use redis::RedisWrite;

/// Values written one after another, with where each ends.
#[derive(Default)]
pub(crate) struct ArgList {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl ArgList {
    /// How many values.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// How many bytes the values take together.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The values, in the order they were added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.data[start..end])
    }
}

impl RedisWrite for ArgList {
    fn write_arg(&mut self, arg: &[u8]) {
        self.data.extend_from_slice(arg);
        self.ends.push(self.data.len());
    }

    fn writer_for_next_arg(&mut self) -> impl io::Write + '_ {
        NextArg { list: self }
    }
}

/// One value being written; it ends where the writer is dropped.
struct NextArg<'a> {
    list: &'a mut ArgList,
}

impl io::Write for NextArg<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.list.data.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for NextArg<'_> {
    fn drop(&mut self) {
        self.list.ends.push(self.list.data.len());
    }
}

#[cfg(test)]
mod tests {
    use redis::ToRedisArgs;

    use super::*;

    #[test]
    fn values_come_back_as_written_whatever_their_kind() {
        let mut list = ArgList::default();
        "key".write_redis_args(&mut list);
        30_000u64.write_redis_args(&mut list);
        "".write_redis_args(&mut list);
        (&[1u8, 0, 255][..]).write_redis_args(&mut list);
        let values: Vec<&[u8]> = list.iter().collect();
        assert_eq!(
            values,
            vec![&b"key"[..], &b"30000"[..], &b""[..], &[1u8, 0, 255][..]]
        );
        assert_eq!(list.len(), 4);
        assert_eq!(list.bytes(), "key30000".len() + 3);
    }

    #[test]
    fn an_empty_list_has_no_values() {
        let list = ArgList::default();
        assert_eq!(list.len(), 0);
        assert_eq!(list.iter().count(), 0);
    }
}
